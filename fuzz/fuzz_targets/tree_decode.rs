//! Tree blobs (unauthenticated once their blob is opened: any bytes a key
//! holder stored): `Tree::decode`, and re-encoding what it accepts.
#![no_main]

use larder::tree::{TREE_VERSION, Tree};
use larder_fuzz::check;
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/tree";

fn one(bytes: &[u8]) {
    let r = Tree::decode(WHAT, bytes);
    check(WHAT, &r);
    if let Ok(t) = r {
        for w in t.nodes.windows(2) {
            assert!(w[0].name < w[1].name);
        }
        let enc = t.encode().expect("an accepted tree re-encodes");
        let back = Tree::decode(WHAT, &enc).expect("a re-encoded tree decodes");
        assert_eq!(back, t);
    }
}

fuzz_target!(|data: &[u8]| {
    one(data);
    let mut v = vec![TREE_VERSION];
    v.extend_from_slice(data);
    one(&v);
});
