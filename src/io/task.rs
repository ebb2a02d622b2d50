//! What the kernel says about one task (a child process or one of our own threads) that does
//! not come back from a system call: its scheduler state, the kernel function it waits in,
//! and its kernel stack, read from `/proc` (a configurable root, so tests can use fixtures).
//!
//! Owns: naming a task (process id, thread id, start time, so that a restarted daemon can
//! tell whether the task it journaled is still the same one) and reading its state. A task
//! in `D` (uninterruptible sleep) cannot be killed: SIGKILL stays pending until the kernel
//! function it sleeps in returns, which for `ib_unregister_device` can be never (it waits
//! for every user of the RDMA device to let go).
//!
//! Does not own: deciding what a blocked task means (the resetter and the engine do).
//!
//! `/proc/PID/stack` needs CAP_SYS_ADMIN (the kernel's `proc_pid_stack` checks it); the
//! service has it. Without it the stack is reported unreadable with the reason, and `wchan`
//! (readable by the task's owner) still names the function.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A task: a process (`tid` = `None`) or one thread of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    /// Process id.
    pub pid: i32,
    /// Thread id, for a thread of `pid` that is not its main thread.
    pub tid: Option<i32>,
    /// The task's start time (field 22 of `stat`, clock ticks since boot): the same pid
    /// with another start time is another task.
    pub start_time: Option<u64>,
}

impl TaskRef {
    /// The calling thread, as a task of this process.
    pub fn current_thread(proc_root: &Path) -> TaskRef {
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let tid = i32::try_from(tid).ok();
        let mut t = TaskRef {
            pid,
            tid,
            start_time: None,
        };
        t.start_time = read_stat(&t.dir(proc_root)).ok().map(|s| s.start_time);
        t
    }

    /// A child process.
    pub fn process(pid: i32, proc_root: &Path) -> TaskRef {
        let mut t = TaskRef {
            pid,
            tid: None,
            start_time: None,
        };
        t.start_time = read_stat(&t.dir(proc_root)).ok().map(|s| s.start_time);
        t
    }

    /// `/proc/PID` or `/proc/PID/task/TID`.
    pub fn dir(&self, proc_root: &Path) -> PathBuf {
        let p = proc_root.join(self.pid.to_string());
        match self.tid {
            Some(tid) if tid != self.pid => p.join("task").join(tid.to_string()),
            _ => p,
        }
    }

    /// In words: `pid 1234` or `thread 1240 of pid 1234`.
    pub fn describe(&self) -> String {
        match self.tid {
            Some(tid) if tid != self.pid => format!("thread {tid} of pid {}", self.pid),
            _ => format!("pid {}", self.pid),
        }
    }

    /// Whether the task still exists and is the same one (same start time when known).
    pub fn alive(&self, proc_root: &Path) -> bool {
        match read_stat(&self.dir(proc_root)) {
            Ok(s) => self.start_time.is_none_or(|t| t == s.start_time),
            Err(_) => false,
        }
    }

    /// What the kernel says about it now.
    pub fn snapshot(&self, proc_root: &Path) -> TaskSnapshot {
        let dir = self.dir(proc_root);
        let stat = read_stat(&dir);
        let (state, comm) = match &stat {
            Ok(s) => (state_words(s.state), Some(s.comm.clone())),
            Err(e) => (format!("unknown ({e})"), None),
        };
        let wchan = std::fs::read_to_string(dir.join("wchan"))
            .ok()
            .map(|w| w.trim().to_string())
            .filter(|w| !w.is_empty() && w != "0");
        let stack = match std::fs::read_to_string(dir.join("stack")) {
            Ok(text) => Ok(parse_stack(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                Err("unreadable: /proc/PID/stack needs CAP_SYS_ADMIN".to_string())
            }
            Err(e) => Err(format!("unreadable: {e}")),
        };
        TaskSnapshot {
            task: *self,
            comm,
            state,
            wchan,
            stack,
        }
    }
}

/// A task's state as the kernel shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSnapshot {
    /// The task.
    pub task: TaskRef,
    /// Its command name (`devlink`, `iser-guard`), when readable.
    pub comm: Option<String>,
    /// Its scheduler state in words: `D (uninterruptible sleep)`.
    pub state: String,
    /// The kernel function it waits in (`wchan`), when the kernel shows it.
    pub wchan: Option<String>,
    /// Its kernel stack, innermost frame first (`ib_uverbs_remove_one+0x9c/0x1c0`), or why
    /// it could not be read.
    pub stack: Result<Vec<String>, String>,
}

impl TaskSnapshot {
    /// The task is in uninterruptible sleep (`D`): no signal can end it.
    pub fn uninterruptible(&self) -> bool {
        self.state.starts_with('D')
    }

    /// One line: `devlink (pid 1234) in D (uninterruptible sleep), waiting in
    /// ib_uverbs_remove_one`.
    pub fn summary(&self) -> String {
        let mut s = match &self.comm {
            Some(c) => format!("{c} ({})", self.task.describe()),
            None => self.task.describe(),
        };
        s.push_str(&format!(" in {}", self.state));
        if let Some(w) = &self.wchan {
            s.push_str(&format!(", waiting in {w}"));
        }
        s
    }

    /// The stack's frames, or one line saying why there is none.
    pub fn stack_lines(&self) -> Vec<String> {
        match &self.stack {
            Ok(frames) if !frames.is_empty() => frames.clone(),
            Ok(_) => vec!["(empty kernel stack: the task is running or gone)".into()],
            Err(why) => vec![format!("(kernel stack {why})")],
        }
    }
}

struct Stat {
    comm: String,
    state: char,
    start_time: u64,
}

/// `stat`: `PID (COMM) S ... starttime(22) ...`. COMM may hold spaces and parentheses, so
/// the fields are counted after the last `)`.
fn read_stat(dir: &Path) -> std::io::Result<Stat> {
    let text = std::fs::read_to_string(dir.join("stat"))?;
    parse_stat(&text).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unexpected stat format: {:?}", text.trim()),
        )
    })
}

fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let mut rest = text.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    // After the state come fields 4..; starttime is field 22, i.e. the 19th after it.
    let start_time = rest.nth(18)?.parse().ok()?;
    Some(Stat {
        comm,
        state,
        start_time,
    })
}

/// `/proc/PID/stack` lines `[<0>] func+0x9c/0x1c0` → `func+0x9c/0x1c0`.
fn parse_stack(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| match l.find("] ") {
            Some(i) => l.get(i + 2..).unwrap_or(l),
            None => l,
        })
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `fs/proc/array.c` `task_state_array`.
fn state_words(c: char) -> String {
    let words = match c {
        'R' => "running",
        'S' => "interruptible sleep",
        'D' => "uninterruptible sleep",
        'T' => "stopped",
        't' => "tracing stop",
        'Z' => "zombie",
        'X' => "dead",
        'I' => "idle",
        'P' => "parked",
        _ => "unknown state",
    };
    format!("{c} ({words})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        // A real 6.12 line, comm with a space and a parenthesis.
        let line = "4242 (rdma (x) y) D 4100 4242 4100 0 -1 4194560 112 0 0 0 0 3 0 0 20 0 1 0 \
                    987654 8794112 448 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            (s.comm.as_str(), s.state, s.start_time),
            ("rdma (x) y", 'D', 987654)
        );
    }

    #[test]
    fn stack_frames_lose_their_address_column() {
        let text = "[<0>] ib_uverbs_remove_one+0x9c/0x1c0 [ib_uverbs]\n[<0>] remove_client_context+0x8f/0xd0 [ib_core]\n";
        assert_eq!(
            parse_stack(text),
            vec![
                "ib_uverbs_remove_one+0x9c/0x1c0 [ib_uverbs]",
                "remove_client_context+0x8f/0xd0 [ib_core]"
            ]
        );
    }

    #[test]
    fn this_thread_reads_itself_from_the_real_proc() {
        let proc_root = Path::new("/proc");
        let me = TaskRef::current_thread(proc_root);
        assert!(me.alive(proc_root));
        let snap = me.snapshot(proc_root);
        // Reading its own stat, the thread is running.
        assert!(snap.state.starts_with('R'), "{snap:?}");
        assert!(!snap.uninterruptible());
        let other = TaskRef {
            start_time: me.start_time.map(|t| t + 1),
            ..me
        };
        assert!(
            !other.alive(proc_root),
            "another start time is another task"
        );
    }
}
