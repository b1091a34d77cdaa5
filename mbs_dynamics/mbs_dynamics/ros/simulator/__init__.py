"""The simulator node (node.py) and its parts."""
