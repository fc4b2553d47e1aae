"""Widgets: ipywidgets + plotly views of backend objects and training events."""
