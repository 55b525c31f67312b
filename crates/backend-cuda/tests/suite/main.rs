//! tessera-backend-cuda's tests. Without a GPU: the typed errors without a driver, and every
//! kernel source compiled to PTX by NVRTC (which needs no driver either). On a CUDA device
//! (skipped elsewhere): the test models against the CPU backend and llama.cpp's fixtures.

mod models;
mod no_driver;
mod nvrtc;
