//! Tests of the nldev codec: real kernel bytes (`captures`), cases the captures lack, built
//! from the uapi layout (`synthetic`), and property tests (`roundtrip`).

mod captures;
mod equivalence;
mod fixture;
mod roundtrip;
mod synthetic;
pub(crate) mod derived;
