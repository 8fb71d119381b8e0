"""The public entry points: request validation, analyze (with its cache) and
analyze_workload. Imports every stage below the UI.
"""
