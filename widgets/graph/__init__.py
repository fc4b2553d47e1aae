"""Views of the logical and executable graphs: the layered layout, the nodes per strategy, the widget."""
