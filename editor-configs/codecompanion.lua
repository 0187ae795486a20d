-- CodeCompanion.nvim: acp-server as an ACP adapter. Open a chat with :CodeCompanionChat.
--
-- CodeCompanion starts the agent with Neovim's environment: the model and API keys set in the
-- shell that started Neovim reach it (or use the configuration file, see docs/configuration.md). It
-- changes the model, the mode and the thinking level only through session config options,
-- which acp-server offers ("model", "mode", "thought_level"), and it can reopen a stored
-- session (session/load).
require("codecompanion").setup({
  adapters = {
    acp = {
      acp_server = function()
        local helpers = require("codecompanion.adapters.acp.helpers")
        return {
          name = "acp_server",
          formatted_name = "acp-server",
          type = "acp",
          roles = { llm = "assistant", user = "user" },
          -- acp-server accepts images; a model that cannot read them gets a note instead.
          opts = { vision = true },
          -- The console script, by absolute path (`which acp-server` in its virtual
          -- environment). No arguments: it serves ACP on stdin/stdout by default.
          commands = { default = { "/absolute/path/to/.venv/bin/acp-server" } },
          defaults = {
            mcpServers = {},
            -- Milliseconds to wait for an answer to each request; acp-server answers
            -- `initialize` and `session/new` at once.
            timeout = 20000,
            -- The model of new chats, as PROVIDER:MODEL (the agent's model ids).
            session_config_options = { model = "ollama:qwen3:8b", mode = "ask" },
          },
          parameters = {
            protocolVersion = 1,
            clientCapabilities = { fs = { readTextFile = true, writeTextFile = true } },
            clientInfo = { name = "CodeCompanion.nvim", version = "1.0.0" },
          },
          handlers = {
            setup = function(self) return true end,
            -- true: no `authenticate` call; keys come from the environment.
            auth = function(self) return true end,
            form_messages = function(self, messages, capabilities)
              return helpers.form_messages(self, messages, capabilities)
            end,
            on_exit = function(self, code) end,
          },
        }
      end,
    },
  },
  interactions = { chat = { adapter = { name = "acp_server", model = "ollama:qwen3:8b" } } },
})
