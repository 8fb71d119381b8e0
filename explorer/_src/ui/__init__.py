"""The app's implementation (ipywidgets + plotly); its public face is explorer.ui."""
