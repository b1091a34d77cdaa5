"""The ROS 2 nodes over the dynamics core: thin layers that convert messages
to arrays and call the core. Importing this package imports rclpy; the core
(mbs_dynamics without .ros) never does."""
