"""rclpy nodes, thin: messages in, act_node's pieces, messages out. The only package that imports rclpy."""
