"""Identification: fitting a model's inertias, joint friction and armature to
recorded data (bags or CSV), so that its inverse dynamics predicts the
robot's measured torques. ROS-free, like the rest of the core: bags are read
with rosbags."""
