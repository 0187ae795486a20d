"""Tools the model can call. `base` is the seam; each module holds tools of one concept."""
