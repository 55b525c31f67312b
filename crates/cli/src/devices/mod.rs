//! `tessera devices`: what each backend can run on here. Each backend's section is its own
//! module; a missing driver or library is a line of the listing, not an error.

mod cuda;

use clap::Args;

#[derive(Args, Debug)]
pub struct DevicesArgs {}

pub fn devices(_args: DevicesArgs) -> anyhow::Result<()> {
    println!("CPU: {}", tessera_quant::isa::level().name());
    for line in cuda::section() {
        println!("{line}");
    }
    Ok(())
}
