-- CodeCompanion.nvim: acp-server as an ACP adapter.
-- CodeCompanion changes the mode only through session/set_config_option ("mode" option).
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
          opts = { vision = false },
          commands = { default = { "/absolute/path/to/.venv/bin/acp-server" } },
          defaults = { mcpServers = {}, timeout = 20000 },
          parameters = {
            protocolVersion = 1,
            clientCapabilities = { fs = { readTextFile = true, writeTextFile = true } },
            clientInfo = { name = "CodeCompanion.nvim", version = "1.0.0" },
          },
          handlers = {
            setup = function(self) return true end,
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
  interactions = { chat = { adapter = { name = "acp_server" } } },
})
