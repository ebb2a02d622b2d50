//! The event loop: feeds the core with inputs and executes its actions.

pub mod notify;
