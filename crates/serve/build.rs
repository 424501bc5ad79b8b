//! Compiles the repository's `proto/` files into the descriptor set that serve's gRPC
//! reflection returns (`protox`: no `protoc` needed).

use prost::Message;

const FILES: [&str; 3] = [
    "tailguard/serve/v1/ping.proto",
    "fgrpc/ping.proto",
    "grpc/health/v1/health.proto",
];

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    println!("cargo:rerun-if-changed={}", root.display());
    for f in FILES {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let set = protox::compile(FILES, [&root]).unwrap_or_else(|e| panic!("proto/: {e}"));
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("descriptors.bin"), set.encode_to_vec()).expect("write OUT_DIR");
}
