//! `tolk`: the broker binary. Everything it does is in `tolk-gateway`; this crate holds only the
//! entry point, so that it can stay at opt-level 3 while the gateway's code is built for size.

fn main() -> std::process::ExitCode {
    tolk_gateway::main()
}
