;;; acp-server for Emacs agent-shell. Start it with M-x agent-shell and pick "acp-server".
;;
;; agent-shell shows every line the agent writes to stderr as an error in the buffer;
;; acp-server writes nothing there unless something is really wrong (keep
;; ACP_SERVER_LOG_LEVEL unset, or "error"). The model (C-c C-v), the mode (C-c C-m) and the
;; thinking level (C-c C-t) come from acp-server's config options.
(require 'agent-shell)

(defun my/acp-server-config ()
  "An agent-shell configuration that starts acp-server."
  (agent-shell-make-agent-config
   :identifier 'acp-server
   :mode-line-name "acp-server"
   :buffer-name "acp-server"
   :shell-prompt "acp-server> "
   :shell-prompt-regexp "acp-server> "
   :client-maker
   (lambda (buffer)
     (agent-shell--make-acp-client
      ;; The console script, by absolute path (`which acp-server` in its virtual
      ;; environment). No parameters: it serves ACP on stdin/stdout by default.
      :command "/absolute/path/to/.venv/bin/acp-server"
      :command-params '()
      ;; Emacs's environment (:inherit-env t), plus the model as PROVIDER:MODEL. API keys
      ;; (OPENAI_API_KEY, ANTHROPIC_API_KEY) come from that environment too.
      :environment-variables (agent-shell-make-environment-variables
                              :inherit-env t
                              "ACP_SERVER_MODEL" "ollama:qwen3:8b")
      :context-buffer buffer))))

(add-to-list 'agent-shell-agent-configs (my/acp-server-config))

;; acp-server keeps every session: list them when a shell starts, then load or resume one.
(setq agent-shell-session-strategy 'prompt)
