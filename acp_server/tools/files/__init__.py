"""The file tools: read_file (text and pictures), write_file, list_directory and edit_file."""
