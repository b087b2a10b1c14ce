// Reads whose body is cut off (a reset, a short body) are asked again here, in one place. The
// store's client retries a request only until its answer begins, and a cold year or a bulk job
// reads hundreds of objects and ranges: one reset among them must not fail the whole answer.
import { UnavailableError } from '../shared/errors.js';

/** Times in all a read is made while its body is cut off. */
export const BODY_ATTEMPTS = 3;

/**
 * `read` again while it fails with an UnavailableError after calling `answered` (its answer
 * began), BODY_ATTEMPTS times in all. A failure before the answer began is the client's to
 * retry and is thrown at once, as is any other error. A read that writes what it receives must
 * write it again whole on a second attempt (at the same offsets, or to a fresh file).
 */
export async function whileCut<T>(read: (answered: () => void) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let began = false;
    try {
      return await read(() => (began = true));
    } catch (err) {
      if (!began || !(err instanceof UnavailableError) || attempt >= BODY_ATTEMPTS) throw err;
    }
  }
}
