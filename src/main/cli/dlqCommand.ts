// `dlq`: the dead-letter queue.
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
        print(values, letters, () => (letters.length === 0 ? 'the dead-letter queue is empty' : letters.map((l) => `${l.id}  ${l.body.slice(0, 120)}`).join('\n')));
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
