"""Strategies: the device options (profiles.Options) read into tiles, threads and vector widths per dispatch group, and
the cost model for fusion.
"""
