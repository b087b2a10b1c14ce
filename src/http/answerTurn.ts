// An answer's turn (admission.ts), held from before its first byte until it ends: the socket's
// bytes tell the admission how fast its client takes them, and a turn taken back cuts it.
import type { Request, Response } from 'express';
import type { Admission } from './admission.js';
import { clientWaitMs } from './sendStall.js';

/** Waits for a turn of `admission` for this answer (`what` names it in the log); given back when the answer ends. */
export async function holdTurn(admission: Pick<Admission, 'enter'>, client: string, req: Request, res: Response, signal: AbortSignal, what: string): Promise<void> {
  const socket = req.socket;
  const reader = {
    // Handed to the kernel: Node counts the bytes still queued in the socket as written.
    bytesTaken: () => socket.bytesWritten - socket.writableLength,
    waitedMs: () => clientWaitMs(res),
    cut: () => {
      req.log.warn({ bytesSent: socket.bytesWritten }, `${what} cut: its client read too slowly while another answer waited for a turn`);
      res.destroy();
    },
  };
  const leave = await admission.enter(client, signal, reader);
  if (res.writableFinished || res.closed) leave();
  res.once('finish', leave).once('close', leave);
}
