//! `dev --resync/--pause/--resume/--dump-flight`: commands sent to the dev loops already running, through
//! their control sockets.

use anyhow::Result;

use crate::cli::dev::DevArgs;
use crate::commands::exit::{Class, Classify, fail};
use crate::devloop::control;
use crate::devloop::control::Command;

/// The command `--resync/--pause/--resume` asks for, if any.
pub(super) fn control_command(args: &DevArgs) -> Option<Command> {
    if let Some(p) = &args.resync {
        return Some(Command::Resync {
            parent: (!p.is_empty()).then(|| p.clone()),
        });
    }
    if args.pause {
        return Some(Command::Pause);
    }
    if let Some(f) = &args.dump_flight {
        // The dev loop runs elsewhere: give it an absolute path.
        let path = std::env::current_dir().map_or_else(|_| f.clone(), |d| d.join(f));
        return Some(Command::DumpFlight {
            path: path.to_string_lossy().into_owned(),
        });
    }
    args.resume.then_some(Command::Resume)
}

/// Send a command to every running dev loop and print their answers. A resync of one parent
/// succeeds when some dev loop knows that parent; any other command when every loop did it.
pub(super) async fn send_control(command: Command) -> Result<()> {
    let dir = control::socket_dir(&crate::commands::sandbox::data_dir().class(Class::Internal)?);
    let answers = control::send(&dir, &command).await.class(Class::Control)?;
    let mut refused = 0;
    let total = answers.len();
    for (socket, ok, message) in answers {
        let pid = socket
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if ok {
            println!("dev loop pid {pid}: {message}");
        } else {
            eprintln!("dev loop pid {pid}: {message}");
            refused += 1;
        }
    }
    let one_parent = matches!(&command, Command::Resync { parent: Some(_) });
    if (one_parent && refused == total) || (!one_parent && refused > 0) {
        return Err(fail(
            Class::Control,
            if one_parent {
                "no running dev loop knows that parent (see above)"
            } else {
                "a dev loop refused the command (see above)"
            },
        ));
    }
    Ok(())
}
