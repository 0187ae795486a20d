"""Tools the model can call: the `Tool` seam (`base`), the toolbox, the defaults, and rooms."""
