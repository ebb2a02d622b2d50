//! Tests of the nldev codec: real kernel bytes (`captures`), cases the captures lack, built
//! from the uapi layout (`synthetic`), and property tests (`roundtrip`).

mod captures;
pub(crate) mod derived;
mod equivalence;
mod fixture;
mod roundtrip;
mod synthetic;
