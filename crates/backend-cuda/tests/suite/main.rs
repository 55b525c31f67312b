//! tessera-backend-cuda's tests. Without a GPU: the typed errors without a driver, every
//! kernel source compiled to PTX by NVRTC (which needs no driver either), and every launch of the
//! model graphs checked against its kernel's parameters. On a CUDA device
//! (skipped elsewhere): the test models against the CPU backend and llama.cpp's fixtures.

mod launches;
mod models;
mod no_driver;
mod nvrtc;
