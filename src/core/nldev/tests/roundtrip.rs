//! Property tests: encode → decode round trips of random typed messages.
