-- avante.nvim: acp-server as an ACP provider. Switch to it with :AvanteSwitchProvider acp-server;
-- :AvanteACPModels and :AvanteACPModes pick the model and the permission mode.
--
-- avante starts the agent with only PATH in its environment, not Neovim's: without the `env`
-- entries below, no API key, no ACP_SERVER_* setting and not even HOME reach acp-server: it
-- finds no model, no configuration file and no stored sessions, and the commands it runs for
-- you (git, ...) miss your HOME and its settings. Pass what you use: os.getenv() forwards a
-- variable from the shell that started Neovim, and one that is not set there is left out (nil).
require("avante").setup({
  provider = "acp-server",
  acp_providers = {
    ["acp-server"] = {
      -- The console script, by absolute path (`which acp-server` in its virtual environment).
      -- No arguments: it serves ACP on stdin/stdout by default.
      command = "/absolute/path/to/.venv/bin/acp-server",
      args = {},
      env = {
        HOME = os.getenv("HOME"),
        -- The model: PROVIDER:MODEL, e.g. "ollama:qwen3:8b" (here: your shell's setting).
        ACP_SERVER_MODEL = os.getenv("ACP_SERVER_MODEL"),
        -- Another configuration file than ~/.config/acp-server/config.toml.
        ACP_SERVER_CONFIG = os.getenv("ACP_SERVER_CONFIG"),
        -- Keys and endpoints for the provider you use (see docs/models.md, "Choosing a model").
        OPENAI_API_KEY = os.getenv("OPENAI_API_KEY"),
        OPENAI_BASE_URL = os.getenv("OPENAI_BASE_URL"),
        ANTHROPIC_API_KEY = os.getenv("ANTHROPIC_API_KEY"),
        ANTHROPIC_BASE_URL = os.getenv("ANTHROPIC_BASE_URL"),
        OLLAMA_HOST = os.getenv("OLLAMA_HOST"),
        -- Optional: where sessions are kept, and logging.
        ACP_SERVER_DATA_DIR = os.getenv("ACP_SERVER_DATA_DIR"),
        ACP_SERVER_LOG_LEVEL = os.getenv("ACP_SERVER_LOG_LEVEL"),
      },
      -- The MCP servers to hand to each session (a list, as in the ACP spec).
      mcp_servers = {},
    },
  },
})
