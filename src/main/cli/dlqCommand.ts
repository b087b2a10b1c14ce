// `dlq`: the dead-letter queue.
import type { DeadLetter } from '../../ops/deadLetters.js';
import { common, print, UsageError, withRuntime, type Command } from './options.js';

export const dlq: Command = {
  summary: 'the dead-letter queue: list, redrive',
  usage: 'dlq list | dlq redrive  [--json]',
  options: common,
  subcommand: true,
  subcommandOptions: { list: [], redrive: [] },
  run: ({ config, values, positionals }) =>
    withRuntime(config, async (rt) => {
      // Loads the SQS SDK: only here.
      const dlq = (await import('../../ops/deadLetters.js')).deadLettersFor(rt);
      if (positionals[0] === 'list') {
        const letters = await dlq.list();
        print(values, letters, () => (letters.length === 0 ? 'the dead-letter queue is empty' : letters.map(describe).join('\n')));
        return 0;
      }
      if (positionals[0] === 'redrive') {
        const n = await dlq.redrive();
        print(values, { redriven: n }, () => `sent ${n} messages back to the queue`);
        return 0;
      }
      throw new UsageError('dlq needs one of: list, redrive');
    }),
};

/** One line a dead letter: its id, what is known of its history, the start of its body. */
function describe(letter: DeadLetter): string {
  const history = [
    letter.sentAt !== undefined && `sent ${letter.sentAt}`,
    letter.receiveCount !== undefined && `received ${letter.receiveCount} times`,
    letter.deadLetteredAt !== undefined && `set aside ${letter.deadLetteredAt}`,
  ].filter(Boolean);
  return `${letter.id}  ${history.length > 0 ? `(${history.join(', ')})  ` : ''}${letter.body.slice(0, 120)}`;
}
