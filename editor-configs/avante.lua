-- avante.nvim: acp-server as an ACP provider. Switch with :AvanteSwitchProvider acp-server
require("avante").setup({
  provider = "acp-server",
  acp_providers = {
    ["acp-server"] = {
      command = "/absolute/path/to/.venv/bin/acp-server",
      args = {},
      env = {},
    },
  },
})
