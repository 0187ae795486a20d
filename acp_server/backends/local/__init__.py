"""The embedded model: a GGUF file served by llama-cpp-python in a child process of ours."""
