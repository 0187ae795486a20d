-- avante.nvim: acp-server as an ACP provider. Switch with :AvanteSwitchProvider acp-server
--
-- avante starts the agent with only PATH in its environment, not Neovim's: without the `env`
-- entries below, no API key, no ACP_SERVER_* setting and not even HOME reach acp-server: it
-- finds no model, and the commands it runs for you (git, ...) miss your HOME and its settings.
-- Pass what you use; os.getenv() forwards a variable from the shell that started Neovim, and
-- a variable that is not set there is simply left out (nil).
require("avante").setup({
  provider = "acp-server",
  acp_providers = {
    ["acp-server"] = {
      command = "/absolute/path/to/.venv/bin/acp-server",
      args = {},
      env = {
        HOME = os.getenv("HOME"),
        -- The model: DIALECT:MODEL, e.g. "ollama:qwen3:8b" (or forward your shell's setting).
        ACP_SERVER_MODEL = os.getenv("ACP_SERVER_MODEL"),
        -- Keys and endpoints for the dialect you use (see the README, "Choosing a model").
        OPENAI_API_KEY = os.getenv("OPENAI_API_KEY"),
        OPENAI_BASE_URL = os.getenv("OPENAI_BASE_URL"),
        ANTHROPIC_API_KEY = os.getenv("ANTHROPIC_API_KEY"),
        OLLAMA_HOST = os.getenv("OLLAMA_HOST"),
        -- Optional: where sessions are kept, and logging.
        ACP_SERVER_DATA_DIR = os.getenv("ACP_SERVER_DATA_DIR"),
        ACP_SERVER_LOG_LEVEL = os.getenv("ACP_SERVER_LOG_LEVEL"),
      },
    },
  },
})
