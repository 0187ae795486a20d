"""`acp-server config`: the configuration in effect, secrets masked; exit 1 for a broken file.

The file is the one the server would read (`--config FILE`, ACP_SERVER_CONFIG, else the user's
configuration directory). Models named with `--model` or ACP_SERVER_MODEL are listed after it,
checked the way the server checks them.
"""

from __future__ import annotations

import argparse
import os
import sys

from acp_server.config.file import ConfigError, config_path, load_config
from acp_server.config.show import render_effective
from acp_server.models.catalogue import ModelChoiceError, build_catalogue, model_values

EXIT_BROKEN = 1


def show_config(args: argparse.Namespace) -> int:
    path, named = config_path(getattr(args, "config", None), os.environ)
    try:
        config = load_config(path, os.environ, must_exist=named)
        values = model_values(getattr(args, "model", None), os.environ)
        catalogue = build_catalogue(values, config)
    except (ConfigError, ModelChoiceError) as exc:
        print(exc, file=sys.stderr)
        return EXIT_BROKEN
    text = render_effective(config)
    if values:
        text += "\n# Models named on the command line or in ACP_SERVER_MODEL:\n"
        text += "".join(f"#   {value}\n" for value in values)
    if catalogue.default:
        text += f"# New sessions start with {catalogue.default}.\n"
    sys.stdout.write(text)
    return 0
