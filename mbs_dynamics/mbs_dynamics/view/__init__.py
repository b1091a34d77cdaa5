"""The 3-D view in the browser (viewer.py, server.py, visuals.py) and SVG plots (svg_plot.py)."""
