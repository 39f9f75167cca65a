// scratch (not committed)
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let c = rusqlite::Connection::open(&p).unwrap();
    let ids: Vec<[u8; 32]> = {
        let mut st = c.prepare("SELECT id FROM blobs").unwrap();
        st.query_map([], |r| r.get::<_, [u8; 32]>(0))
            .unwrap()
            .map(|x| x.unwrap())
            .collect()
    };
    for sql in [
        "SELECT type FROM blobs WHERE id = ?1",
        "SELECT p.id, b.type FROM blobs b JOIN packs p ON p.num = b.pack WHERE b.id = ?1",
        "SELECT b.type, b.pack FROM blobs b WHERE b.id = ?1",
    ] {
        let t = std::time::Instant::now();
        for id in &ids {
            let mut st = c.prepare_cached(sql).unwrap();
            let _: i64 = st.query_row([&id[..]], |r| r.get(0)).unwrap_or(0);
        }
        eprintln!("{sql}: {:?}", t.elapsed());
        let t = std::time::Instant::now();
        for id in &ids {
            let mut st = c.prepare_cached(sql).unwrap();
            let _: i64 = st.query_row([id], |r| r.get(0)).unwrap_or(0);
        }
        eprintln!("  as [u8;32] param: {:?}", t.elapsed());
    }
}
