// A bound on how long a caller waits for work it cannot cancel (an SDK call, a file-system
// write): past it the caller gets onTimeout()'s error; the work may still finish, and its
// late failure goes to onLateFailure instead of becoming an unhandled rejection.
export async function withDeadline<T>(
  work: Promise<T>,
  ms: number,
  onTimeout: () => Error,
  onLateFailure: (err: unknown) => void = () => {},
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      work.catch(onLateFailure);
      reject(onTimeout());
    }, ms);
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}
