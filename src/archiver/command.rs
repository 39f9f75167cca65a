//! `backup --stdin-from-command`: the standard output of a command (a
//! database dump, say) as the stream [`super::stdin`] stores, as restic's
//! flag of that name. The command is started directly (no shell), with
//! standard input from `/dev/null` and its standard error passed through;
//! reading its output to the end waits for it, and [`CommandOutput::finish`]
//! then says whether it failed (a non-zero exit, a signal), so the backup
//! saves no snapshot of a failed dump (after storing all it wrote, for
//! the next run to reuse). A stream dropped before its end
//! (the backup failed or was interrupted) kills the command and reaps it.

use crate::error::{Error, Result};
use std::ffi::OsString;
use std::io::{self, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};

/// A running command whose standard output is read as a stream.
#[derive(Debug)]
pub struct CommandOutput {
    child: Child,
    stdout: ChildStdout,
    label: String,
    /// How it ended, once waited for (at the end of its output).
    status: Option<ExitStatus>,
}

/// How errors name the command: "command `pg_dump mydb`".
pub fn label(argv: &[OsString]) -> String {
    let words: Vec<String> = argv.iter().map(|a| a.to_string_lossy().into()).collect();
    format!("command `{}`", words.join(" "))
}

impl CommandOutput {
    /// Starts `argv` (the program, then its arguments).
    pub fn spawn(argv: &[OsString]) -> Result<CommandOutput> {
        let Some((program, args)) = argv.split_first() else {
            return Err(Error::Usage(
                "--stdin-from-command needs a command to run (after `--`)".into(),
            ));
        };
        let label = label(argv);
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::io(PathBuf::from(&label), e))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::internal(format!("{label}: no output pipe")));
        };
        Ok(CommandOutput {
            child,
            stdout,
            label,
            status: None,
        })
    }

    /// The name errors give the command (see [`label`]).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Once its output was read to the end: whether the command
    /// succeeded, as an error naming it and how it ended if it did not.
    pub fn finish(&mut self) -> Result<()> {
        let status = match self.status {
            Some(s) => s,
            None => {
                return Err(Error::internal(format!(
                    "{}: its output was not read to the end",
                    self.label
                )));
            }
        };
        if status.success() {
            Ok(())
        } else {
            Err(Error::io(
                PathBuf::from(&self.label),
                io::Error::other(format!("failed ({status}); no snapshot is saved")),
            ))
        }
    }
}

impl Read for CommandOutput {
    /// The command's output; at its end, waits for the command (whose
    /// status [`CommandOutput::finish`] then gives).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.status.is_some() {
            return Ok(0);
        }
        let n = self.stdout.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.status = Some(self.child.wait()?);
        }
        Ok(n)
    }
}

impl Drop for CommandOutput {
    fn drop(&mut self) {
        if self.status.is_none() {
            // Stopped before the end: the command's output is not wanted.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    fn read_all(c: &mut CommandOutput) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        c.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn reads_the_output_of_a_command_that_succeeds() {
        let mut c = CommandOutput::spawn(&argv(&["sh", "-c", "printf 'a\\nb'"])).unwrap();
        assert_eq!(c.label(), "command `sh -c printf 'a\\nb'`");
        assert!(c.finish().is_err(), "finished before its end was read");
        assert_eq!(read_all(&mut c).unwrap(), b"a\nb");
        // Read again after the end: still the end, no second wait.
        assert_eq!(c.read(&mut [0; 8]).unwrap(), 0);
        c.finish().unwrap();
    }

    #[test]
    fn a_failing_command_is_read_whole_then_finishes_with_an_error() {
        let mut c = CommandOutput::spawn(&argv(&["sh", "-c", "printf part; exit 3"])).unwrap();
        assert_eq!(read_all(&mut c).unwrap(), b"part", "all it wrote is read");
        let e = c.finish().unwrap_err().to_string();
        assert!(
            e.starts_with("command `sh -c printf part; exit 3`: ") && e.contains("exit status: 3"),
            "{e}"
        );
        let mut c = CommandOutput::spawn(&argv(&["sh", "-c", "kill -9 $$"])).unwrap();
        assert_eq!(read_all(&mut c).unwrap(), b"");
        let e = c.finish().unwrap_err().to_string();
        assert!(e.contains("signal: 9"), "{e}");
    }

    #[test]
    fn a_command_that_cannot_start_or_is_missing_is_a_clear_error() {
        let e = CommandOutput::spawn(&argv(&["/nonexistent/larder-dump"])).unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with("command `/nonexistent/larder-dump`: "), "{m}");
        assert!(matches!(
            CommandOutput::spawn(&[]),
            Err(Error::Usage(m)) if m.contains("needs a command")
        ));
    }

    #[test]
    fn dropping_the_stream_early_kills_the_command() {
        let mut c = CommandOutput::spawn(&argv(&["sh", "-c", "echo $$; exec sleep 60"])).unwrap();
        let mut line = [0u8; 32];
        let n = c.read(&mut line).unwrap();
        let pid: i32 = std::str::from_utf8(&line[..n])
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        drop(c);
        // Reaped: the pid no longer names a process of ours.
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None);
        assert!(alive.is_err(), "the command still runs after the drop");
    }
}
