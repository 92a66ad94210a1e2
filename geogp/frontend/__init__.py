"""The xarray front end: DataArrays and point tables in, fitted models, predictions and files
out."""
