"""The multibody model: the URDF parsed (parsers/), the model and its packed arrays (model.py), joints (joints.py),
configurations (configuration.py), the kernels' scratch (workspace.py), meshes and resources the URDF names."""
