//! The per-port recovery state machine.
