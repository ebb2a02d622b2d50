//! Cases the captures lack, built from the uapi layout.
