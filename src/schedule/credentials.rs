//! Credential files must be private: a password or identity file that the
//! group or others can read (or write) is refused, as ssh refuses such a
//! private key. The error names the file, the mode and the fix.

use super::profile::{Credential, Profile};
use crate::error::Result;
use std::os::unix::fs::PermissionsExt;

/// Checks the profile's credential file, if it uses one.
pub fn check(p: &Profile) -> Result<()> {
    let (key, path) = match &p.credential {
        Credential::PasswordFile(f) => ("password-file", f),
        Credential::IdentityFile(f) => ("identity-file", f),
        Credential::PasswordCommand(_) => return Ok(()),
    };
    let meta =
        std::fs::metadata(path).map_err(|e| p.error_at(key, format!("{}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(p.error_at(key, format!("{} is not a regular file", path.display())));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(p.error_at(
            key,
            format!(
                "{} has mode {mode:04o}: a credential file must not be accessible to group or \
                 others; run `chmod 600 {}`",
                path.display(),
                path.display()
            ),
        ));
    }
    Ok(())
}
