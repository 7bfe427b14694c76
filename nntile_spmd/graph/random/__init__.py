"""Graph layer, random family: randn and dropout. ops.py: builders; rules.py:
registry entries and dropout's gradient.
"""
