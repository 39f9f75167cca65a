//! Naming packs on the command line (`repair packs`, `find --pack`): a
//! full id or a prefix that names one pack, among those the storage or the
//! index holds.

use super::Repository;
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;

impl Repository {
    /// Resolves `given` (full ids or unique prefixes) to packs the storage or
    /// the index holds.
    pub fn resolve_packs(&self, given: &[String]) -> Result<Vec<Id>> {
        let mut known: Vec<Id> = self
            .backend
            .list(Kind::Pack)?
            .into_iter()
            .filter_map(|e| Id::from_hex(&e.name).ok())
            .collect();
        known.extend(self.index()?.packs()?.into_iter().map(|(id, _)| id));
        known.sort_unstable();
        known.dedup();
        let mut out = Vec::new();
        for g in given {
            let p = g.trim().to_ascii_lowercase();
            if p.is_empty() || p.len() > 64 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::Usage(format!("{g:?} is not a pack id")));
            }
            let hits: Vec<&Id> = known
                .iter()
                .filter(|id| id.to_hex().starts_with(&p))
                .collect();
            match hits.as_slice() {
                [id] => {
                    if !out.contains(*id) {
                        out.push(**id);
                    }
                }
                [] => {
                    return Err(Error::Usage(format!(
                        "pack {g}: neither the storage nor the index has it"
                    )));
                }
                _ => {
                    return Err(Error::Usage(format!(
                        "pack {g}: the prefix matches {} packs; give more of the id",
                        hits.len()
                    )));
                }
            }
        }
        Ok(out)
    }
}
