//! Dropping root once the capture is open: the sockets stay usable, nothing else does.

use std::io;

use nix::unistd::{geteuid, getuid, setgid, setgroups, setuid, Uid, User};

use crate::LiveError;

/// Becomes `user` (its uid, its primary group, no supplementary groups). Call after opening
/// the capture and before reading: open sockets keep working, new ones cannot be made.
pub fn drop_to_user(user: &str) -> Result<(), LiveError> {
    // A failed lookup (a name with a NUL, an unreadable passwd database) is no such user too.
    let Ok(Some(found)) = User::from_name(user) else {
        return Err(LiveError::NoSuchUser(user.to_string()));
    };
    let (uid, gid) = (found.uid, found.gid);
    let failed = |e: nix::Error| LiveError::Privileges { user: user.to_string(), error: io::Error::from(e) };
    // Groups first, then the group, then the user: after setuid the others are no longer allowed.
    // These go through libc, which applies them to every thread of the process (the raw system
    // calls would change the calling thread only).
    setgroups(&[gid]).map_err(failed)?;
    setgid(gid).map_err(failed)?;
    setuid(uid).map_err(failed)?;
    let back = !uid.is_root() && setuid(Uid::from_raw(0)).is_ok();
    if getuid() != uid || geteuid() != uid || back {
        return Err(LiveError::Privileges {
            user: user.to_string(),
            error: io::Error::other("the process could still become root"),
        });
    }
    Ok(())
}
