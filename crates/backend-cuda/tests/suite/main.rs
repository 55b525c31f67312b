//! tessera-backend-cuda's tests that need no GPU: the typed errors without a driver, and every
//! kernel source compiled to PTX by NVRTC (which needs no driver either).

mod no_driver;
mod nvrtc;
