// `keys`: partner API keys kept in the ledger.
import { GENERATED_KEY_NAME, generatedKey, isKeyName, keyDigest, newKey } from '../../partners/apiKeys.js';
import { common, deps, print, required, UsageError, withRuntime, type Command } from './options.js';

export const keys: Command = {
  summary: 'partner API keys kept in the ledger (hashed): list, add, rotate, revoke',
  usage: 'keys list | keys add --name NAME (a name no key has had) | keys rotate --name NAME | keys revoke --name NAME  [--json]',
  options: { ...common, name: { type: 'string' } },
  subcommand: true,
  subcommandOptions: { list: [], add: ['name'], rotate: ['name'], revoke: ['name'] },
  run: ({ config, values, positionals }) => {
    // Options are checked before anything opens: a mistake is a usage error (2), never a store's (69).
    const sub = positionals[0];
    if (sub !== 'list' && sub !== 'add' && sub !== 'rotate' && sub !== 'revoke') throw new UsageError('keys needs one of: list, add, rotate, revoke');
    const name = sub === 'list' ? '' : required(values, 'name');
    if (sub !== 'list' && !isKeyName(name)) throw new UsageError('--name must be 1 to 64 characters of a-z 0-9 . _ - starting with a letter or digit');
    return withRuntime(config, async (rt) => {
      if (sub === 'list') {
        const kept = (await rt.ledger.listKeys()).map((k) => ({ name: k.name, from: 'ledger', created_at: k.created_at, ...(k.revoked_at && { revoked_at: k.revoked_at }) }));
        const listed = [...config.apiKeys.map((k) => ({ name: k.name, from: 'API_KEYS' })), ...kept];
        // With none configured or kept, the service runs on the key it generated for the data dir.
        const generated = listed.length === 0 ? await generatedKey(config.dataDir) : undefined;
        if (generated) listed.push({ name: GENERATED_KEY_NAME, from: `generated (${generated.file})` });
        print(values, listed, () => listed.map((k) => `${k.name}  ${k.from}${'revoked_at' in k && k.revoked_at ? `  revoked ${k.revoked_at}` : ''}`).join('\n') || 'no keys');
        return 0;
      }
      // A partner's reports and rights follow its key's name: a new key takes a name of its own.
      const configured = config.apiKeys.some((k) => k.name === name);
      // The ledger's keys are revoked here; a key in API_KEYS is the configuration's to remove.
      const stillConfigured = () => {
        if (configured) process.stderr.write(`the key of API_KEYS named ${name} still works: remove it from API_KEYS and restart the service to stop it\n`);
      };
      if (sub === 'revoke') {
        // A name no key has (a typo) is a mistake in the options, judged once the ledger is open.
        if (!configured && !(await rt.ledger.listKeys()).some((k) => k.name === name)) {
          // The generated key lives in its file, not the ledger: it is switched off by adding another.
          if (name === GENERATED_KEY_NAME && (await generatedKey(config.dataDir))) throw new UsageError(`--name ${name}: the generated key is not the ledger's to revoke: it stops working once a key is added (keys add) or API_KEYS is set`);
          throw new UsageError(`--name ${name}: no key is named so (keys list shows them)`);
        }
        const n = await rt.ledger.revokeKeys(name);
        print(values, { name, revoked: n }, () => `revoked ${n} key(s) named ${name}`);
        stillConfigured();
        return n > 0 ? 0 : 1;
      }
      if (sub === 'add' && configured) {
        process.stderr.write(`the name ${name} is a key in API_KEYS, and its reports and rights follow the name: choose another name\n`);
        return 1;
      }
      // The key generated for the data directory had the name, and maybe reports under it.
      const generated = name === GENERATED_KEY_NAME ? await generatedKey(config.dataDir) : undefined;
      if (sub === 'add' && generated) {
        process.stderr.write(`the name ${name} is the key generated for this data directory (${generated.file}), and its reports and rights follow the name: choose another name\n`);
        return 1;
      }
      // A partner whose key was dropped from API_KEYS keeps its name through its reports: a rotation gives it a key again.
      if (sub === 'rotate' && !configured && !(await rt.ledger.listKeys()).some((k) => k.name === name) && !(await rt.ledger.hasReports(name))) {
        throw new UsageError(`--name ${name}: no key is named so, and no report is: add one with keys add --name ${name}`);
      }
      // The key is shown once; the ledger keeps only its digest.
      const key = newKey();
      let revoked = 0;
      try {
        if (sub === 'rotate') revoked = await rt.ledger.rotateKey(name, keyDigest(key));
        else await rt.ledger.addKey(name, keyDigest(key));
      } catch (err) {
        if (!(err instanceof deps.KeyNameInUseError) && !(err instanceof deps.KeyRotationConflictError)) throw err;
        process.stderr.write(`${err.message}\n`);
        return 1;
      }
      // A later rotation run meanwhile (by another operator) revoked this one's key: it is no key to hand out.
      if ((await rt.ledger.keyByDigest(keyDigest(key)))?.revoked_at) {
        process.stderr.write(`another rotation of ${name} ran at the same time and revoked the key made here: its key is the one to give the partner\n`);
        return 1;
      }
      print(values, { name, key, revoked }, () => `${name}: ${key}${sub === 'rotate' ? `\n(revoked ${revoked} earlier key(s) of ${name})` : ''}\nKeep it now: it is not shown again.`);
      stillConfigured();
      return 0;
    });
  },
};
