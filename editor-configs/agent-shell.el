;; Emacs agent-shell: acp-server as an agent. agent-shell shows every stderr line as an
;; error, and acp-server logs nothing to stderr unless something is really wrong.
(require 'agent-shell)

(defun my/acp-server-config ()
  (agent-shell-make-agent-config
   :identifier 'acp-server
   :mode-line-name "acp-server"
   :buffer-name "acp-server"
   :shell-prompt "acp-server> "
   :shell-prompt-regexp "acp-server> "
   :client-maker (lambda (buffer)
                   (agent-shell--make-acp-client
                    :command "/absolute/path/to/.venv/bin/acp-server"
                    :command-params '()
                    :environment-variables (agent-shell-make-environment-variables :inherit-env t)
                    :context-buffer buffer))))

(add-to-list 'agent-shell-agent-configs (my/acp-server-config))
