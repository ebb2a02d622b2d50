//! The simulated host driven by tests and `iser-guard simulate`.
