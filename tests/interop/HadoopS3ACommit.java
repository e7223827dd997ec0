/*
 * Drives Hadoop's own S3A committers on a real S3 server for dataferry's interop tests
 * (tests/interop/test_hadoop_s3a.py) and benchmark (`dataferry bench commit --s3-local
 * --hadoop-s3a`). The server and credentials come from the environment: S3A_ENDPOINT,
 * S3A_KEY, S3A_SECRET. Modes (several on one command line, separated by "--"):
 *
 *   tasks KIND DEST JOB_ID JOB_UUID SPEC  set up the job, then for each task of SPEC (lines
 *                                         "<task index>\t<relative path>") write its files
 *                                         through the committer's work path (content
 *                                         "<index>:<path>", UTF-8) and commit the task; prints
 *                                         "task\t<task id>\t<attempt id>" per task and, for the
 *                                         staging committers, "pendingset\t<local path>" per
 *                                         committed task's pendingset (named by its task id)
 *   commit KIND DEST JOB_ID JOB_UUID      commit the job (magic: the pendingsets in its magic
 *                                         directory; staging: those its tasks committed)
 *   commit-pendingsets DEST FILE...       load each local .pendingset as Hadoop's staging job
 *                                         commit does and complete its uploads with Hadoop's
 *                                         CommitOperations; prints "committed\t<uri>" each
 *   abort KIND DEST JOB_ID JOB_UUID       abort the job (every upload it left pending)
 *   read-success URI                      load a _SUCCESS, print "file\t<name>" each and
 *                                         "committer\t<name>"
 *   list-uploads DEST                     print "upload\t<key>\t<upload id>" per pending upload
 *   time                                  print "time\t<nanoTime>" (benchmarks bracket a mode)
 *
 * KIND is magic, directory or partitioned. DEST is an s3a:// URI. The job's UUID is passed as
 * spark.sql.sources.writeJobUUID, as Spark does, and the job attempt is 0.
 */

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.fs.s3a.commit.AbstractS3ACommitter;
import org.apache.hadoop.fs.s3a.commit.files.PendingSet;
import org.apache.hadoop.fs.s3a.commit.files.SinglePendingCommit;
import org.apache.hadoop.fs.s3a.commit.files.SuccessData;
import org.apache.hadoop.fs.s3a.commit.impl.CommitOperations;
import org.apache.hadoop.fs.s3a.commit.magic.MagicS3GuardCommitter;
import org.apache.hadoop.fs.s3a.commit.staging.DirectoryStagingCommitter;
import org.apache.hadoop.fs.s3a.commit.staging.PartitionedStagingCommitter;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.task.JobContextImpl;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;

import software.amazon.awssdk.services.s3.model.MultipartUpload;

public final class HadoopS3ACommit {

  private static final PrintStream OUT =
      new PrintStream(System.out, true, StandardCharsets.UTF_8);

  private HadoopS3ACommit() {
  }

  public static void main(String[] args) throws Exception {
    List<String> current = new ArrayList<>();
    for (String arg : args) {
      if (arg.equals("--")) {
        run(current);
        current = new ArrayList<>();
      } else {
        current.add(arg);
      }
    }
    if (!current.isEmpty()) {
      run(current);
    }
  }

  private static void run(List<String> a) throws Exception {
    switch (a.get(0)) {
      case "try": // the mode that follows, expected to fail: its error is printed, not thrown
        try {
          run(a.subList(1, a.size()));
          OUT.println("succeeded\t" + a.get(1));
        } catch (Exception e) {
          OUT.println("failed\t" + a.get(1) + "\t" + String.valueOf(e).replace('\n', ' '));
        }
        break;
      case "tasks":
        writeAndCommitTasks(a.get(1), new Path(a.get(2)), a.get(3), a.get(4), a.get(5));
        break;
      case "commit":
        commitJob(a.get(1), new Path(a.get(2)), a.get(3), a.get(4));
        break;
      case "commit-pendingsets":
        commitPendingsets(new Path(a.get(1)), a.subList(2, a.size()));
        break;
      case "abort":
        abortJob(a.get(1), new Path(a.get(2)), a.get(3), a.get(4));
        break;
      case "read-success":
        readSuccess(new Path(a.get(1)));
        break;
      case "list-uploads":
        listUploads(new Path(a.get(1)));
        break;
      case "time":
        OUT.println("time\t" + System.nanoTime());
        break;
      default:
        throw new IllegalArgumentException("unknown mode " + a);
    }
  }

  /** S3A on the test server: path-style, plain HTTP, the server's credentials. */
  static Configuration conf(String jobUuid) {
    Configuration conf = new Configuration();
    conf.set("fs.s3a.endpoint", System.getenv("S3A_ENDPOINT"));
    conf.set("fs.s3a.endpoint.region", "us-east-1");
    conf.setBoolean("fs.s3a.path.style.access", true);
    conf.setBoolean("fs.s3a.connection.ssl.enabled", false);
    conf.set("fs.s3a.access.key", System.getenv("S3A_KEY"));
    conf.set("fs.s3a.secret.key", System.getenv("S3A_SECRET"));
    conf.set("fs.s3a.aws.credentials.provider",
        "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider");
    conf.setBoolean("fs.s3a.committer.magic.enabled", true);
    conf.set("fs.s3a.change.detection.source", "etag");
    conf.set("fs.s3a.change.detection.mode", "server");
    conf.setBoolean("fs.s3a.change.detection.version.required", false);
    conf.setInt("fs.s3a.bucket.probe", 0);
    conf.setInt("fs.s3a.attempts.maximum", 2);
    conf.setInt("fs.s3a.retry.limit", 2);
    conf.set("fs.s3a.committer.staging.conflict-mode", "append");
    // the names the tasks gave (by default the staging committers add the job's UUID to each)
    conf.setBoolean("fs.s3a.committer.staging.unique-filenames", false);
    conf.set("fs.s3a.committer.staging.tmp.path",
        System.getProperty("java.io.tmpdir") + "/hadoop-s3a-staging-" + jobUuid);
    conf.set("fs.s3a.buffer.dir", System.getProperty("java.io.tmpdir") + "/hadoop-s3a-buffer");
    conf.set("spark.sql.sources.writeJobUUID", jobUuid);
    conf.setInt("mapreduce.job.application.attempt.id", 0);
    return conf;
  }

  private static AbstractS3ACommitter committer(String kind, Path dest, TaskAttemptContext context)
      throws IOException {
    switch (kind) {
      case "magic":
        return new MagicS3GuardCommitter(dest, context);
      case "directory":
        return new DirectoryStagingCommitter(dest, context);
      case "partitioned":
        return new PartitionedStagingCommitter(dest, context);
      default:
        throw new IllegalArgumentException("unknown committer " + kind);
    }
  }

  /** The task attempt context a driver uses for job setup and commit (Spark: task 0). */
  private static TaskAttemptContext driverContext(Configuration conf, JobID job) {
    return new TaskAttemptContextImpl(conf, new TaskAttemptID(new TaskID(job, TaskType.MAP, 0), 0));
  }

  private static void writeAndCommitTasks(String kind, Path dest, String jobId, String jobUuid,
      String spec) throws IOException {
    Configuration conf = conf(jobUuid);
    JobID job = JobID.forName(jobId);
    JobContext jobContext = new JobContextImpl(conf, job);
    AbstractS3ACommitter driver = committer(kind, dest, driverContext(conf, job));
    driver.setupJob(jobContext);

    Map<Integer, List<String>> tasks = new TreeMap<>();
    for (String line : Files.readAllLines(Paths.get(spec), StandardCharsets.UTF_8)) {
      if (line.isEmpty()) {
        continue;
      }
      String[] parts = line.split("\t", 2);
      tasks.computeIfAbsent(Integer.parseInt(parts[0]), k -> new ArrayList<>()).add(parts[1]);
    }
    for (Map.Entry<Integer, List<String>> task : tasks.entrySet()) {
      TaskAttemptID attempt = new TaskAttemptID(new TaskID(job, TaskType.MAP, task.getKey()), 0);
      TaskAttemptContext context = new TaskAttemptContextImpl(conf, attempt);
      AbstractS3ACommitter committer = committer(kind, dest, context);
      committer.setupTask(context);
      Path work = committer.getWorkPath();
      FileSystem fs = work.getFileSystem(conf);
      for (String relative : task.getValue()) {
        byte[] data = (task.getKey() + ":" + relative).getBytes(StandardCharsets.UTF_8);
        try (OutputStream out = fs.create(new Path(work, relative), false)) {
          out.write(data);
        }
      }
      if (committer.needsTaskCommit(context)) {
        committer.commitTask(context);
      }
      OUT.println("task\t" + attempt.getTaskID() + "\t" + attempt);
    }
    if (!kind.equals("magic")) {
      Path root = new Path("file", null, conf.get("fs.s3a.committer.staging.tmp.path"));
      FileSystem local = root.getFileSystem(conf);
      RemoteIterator<LocatedFileStatus> it = local.listFiles(root, true);
      while (it.hasNext()) {
        Path p = it.next().getPath();
        // a committed task's pendingset is the file <task id> of the wrapped committer's job
        // attempt directory (FileOutputCommitter v1 renamed the attempt's pendingset to it)
        if (p.getName().startsWith("task_")) {
          OUT.println("pendingset\t" + p.toUri().getPath());
        }
      }
    }
  }

  private static void commitJob(String kind, Path dest, String jobId, String jobUuid)
      throws IOException {
    Configuration conf = conf(jobUuid);
    JobID job = JobID.forName(jobId);
    committer(kind, dest, driverContext(conf, job)).commitJob(new JobContextImpl(conf, job));
    OUT.println("committed\t" + dest);
  }

  private static void abortJob(String kind, Path dest, String jobId, String jobUuid)
      throws IOException {
    Configuration conf = conf(jobUuid);
    JobID job = JobID.forName(jobId);
    committer(kind, dest, driverContext(conf, job))
        .abortJob(new JobContextImpl(conf, job), JobStatus.State.FAILED);
    OUT.println("aborted\t" + dest);
  }

  private static void commitPendingsets(Path dest, List<String> files) throws IOException {
    Configuration conf = conf("");
    S3AFileSystem fs = (S3AFileSystem) dest.getFileSystem(conf);
    CommitOperations ops = new CommitOperations(fs);
    for (String file : files) {
      Path path = new Path("file", null, file);
      FileSystem local = path.getFileSystem(conf);
      PendingSet pendingSet = PendingSet.load(local, path, local.getFileStatus(path));
      pendingSet.validate();
      for (SinglePendingCommit commit : pendingSet.getCommits()) {
        commit.validate();
        ops.commitOrFail(commit);
        OUT.println("committed\t" + commit.getUri());
      }
    }
  }

  private static void readSuccess(Path file) throws IOException {
    FileSystem fs = file.getFileSystem(conf(""));
    SuccessData success = SuccessData.load(fs, file);
    for (String name : success.getFilenames()) {
      OUT.println("file\t" + name);
    }
    OUT.println("committer\t" + success.getCommitter());
  }

  private static void listUploads(Path dest) throws IOException {
    S3AFileSystem fs = (S3AFileSystem) dest.getFileSystem(conf(""));
    for (MultipartUpload u : new CommitOperations(fs).listPendingUploadsUnderPath(dest)) {
      OUT.println("upload\t" + u.key() + "\t" + u.uploadId());
    }
  }
}
