//! The `simstore` command-line tool.

fn main() {
    std::process::exit(simstore_cli::run());
}
